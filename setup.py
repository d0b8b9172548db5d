"""Package discovery (pyproject.toml holds everything else).

``opera`` and every sub-package under it are found on disk, so a new room cannot be left out of the
wheel. Two of Opera's packages live in top-level folders of their own (the design keeps
``instrumentation/`` and ``templates/`` beside ``opera/``) and are installed as ``opera.instrumentation``
and ``opera.templates``; their sub-packages, if they ever get any, are found the same way.
"""

from setuptools import find_packages, setup

MAPPED_DIRS = {"opera": "opera", "opera.instrumentation": "instrumentation", "opera.templates": "templates"}


def _discover() -> list[str]:
    packages = []
    for name, folder in MAPPED_DIRS.items():
        packages.append(name)
        packages += [f"{name}.{sub}" for sub in find_packages(folder)]
    return packages


setup(package_dir=MAPPED_DIRS, packages=_discover())
