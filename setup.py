"""Maps the top-level code folders onto one import package, ``stromboli``.

The design card asks for ``core/``, ``integrations/`` and ``webhooks/`` at the top level; they
install as ``stromboli.core`` and friends so nothing generic lands in site-packages.
"""

from setuptools import find_packages, setup

FOLDERS = ("core", "integrations", "webhooks")

packages = []
for folder in FOLDERS:
    packages.append(f"stromboli.{folder}")
    packages += [f"stromboli.{folder}.{sub}" for sub in find_packages(folder)]

setup(
    packages=packages,
    package_dir={f"stromboli.{folder}": folder for folder in FOLDERS},
    package_data={"stromboli.core": ["simulate/templates/*"]},
)
