"""psnet-testbed: packet-level emulation of PSNet, FatTree and BCube for parameter-server training."""

from setuptools import find_packages, setup

setup(
    name="psnet-testbed",
    version="0.1.0",
    description="Mininet/OVS/os-ken testbed that measures batch completion time of "
    "parameter-server training on PSNet, FatTree and BCube",
    python_requires=">=3.11",
    packages=find_packages(exclude=["tests", "tests.*"]),
    package_data={"topologies": ["*.yaml"], "replays": ["templates/*.j2"]},
    entry_points={"console_scripts": ["testbed = testbed.cli:main"]},
)
