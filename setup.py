"""Maps the top-level code folders onto one import package, ``stromboli``.

The design card asks for ``core/``, ``integrations/`` and ``webhooks/`` at the top level; they
install as ``stromboli.core`` and friends so nothing generic lands in site-packages. The package
itself is ``src/stromboli/``, whose entries are links to those folders: an editable install is
then one path in a ``.pth`` file, which mypy, pyright and editors follow (a mapping of package
names to folders needs an import hook that static tools cannot see).

Two more links carry data a user's install needs: ``hack`` (the control plane's pins and build
script, for ``stromboli dev-cluster up``) and ``examples`` (for ``stromboli simulate
--example``). Packages are found through ``src/stromboli/`` rather than the top-level folders,
so that a wheel built from the sdist (where the links are plain folders) holds the same files.
"""

from setuptools import find_packages, setup

FOLDERS = ("core", "integrations", "webhooks")
DATA_LINKS = ("hack", "examples")

HACK_FILES = ["go.mod", "go.sum", "tools.go", "build-control-plane.sh"]
"""What building the control plane reads; the bump script and notes stay in the checkout."""

packages = ["stromboli"]
for folder in FOLDERS:
    packages.append(f"stromboli.{folder}")
    packages += [f"stromboli.{folder}.{sub}" for sub in find_packages(f"src/stromboli/{folder}")]

setup(
    packages=packages,
    package_dir={"": "src"},
    package_data={
        "stromboli": [
            "py.typed",
            *(f"hack/{name}" for name in HACK_FILES),
            # The folders core/cli/examples.py lists examples from (FOLDERS there).
            "examples/*.yaml",
            "examples/gpu/*.yaml",
            "examples/frameworks/*.yaml",
        ]
    },
    # Only what package_data names; a MANIFEST.in would be a second list to keep in step.
    include_package_data=False,
)
