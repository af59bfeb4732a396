"""Maps the top-level code folders onto one import package, ``stromboli``.

The design card asks for ``core/``, ``integrations/`` and ``webhooks/`` at the top level; they
install as ``stromboli.core`` and friends so nothing generic lands in site-packages. The package
itself is ``src/stromboli/``, whose entries are links to those folders: an editable install is
then one path in a ``.pth`` file, which mypy, pyright and editors follow (a mapping of package
names to folders needs an import hook that static tools cannot see).
"""

from setuptools import find_packages, setup

FOLDERS = ("core", "integrations", "webhooks")

packages = ["stromboli"]
for folder in FOLDERS:
    packages.append(f"stromboli.{folder}")
    packages += [f"stromboli.{folder}.{sub}" for sub in find_packages(folder)]

setup(
    packages=packages,
    package_dir={"": "src"},
    package_data={"stromboli": ["py.typed"]},
)
