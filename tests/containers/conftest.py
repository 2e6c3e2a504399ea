"""Fixtures of the container tests: hosts from the harness's images (tests/harness, `import harness`).

These tests run on the machine's native architecture (fast) and need root (rootful podman), like the
rest of `make test`. vllm_build's lifecycle and fleet tests compile on harness.BUILD_ARCH: the machine's
own by default (what they prove does not depend on the architecture); `make build-arm64` runs them on
aarch64, emulated on an x86_64 machine. The aarch64 compile itself is proven in CI by the molecule
`site` scenario.
"""

from __future__ import annotations

import pytest

import harness
from harness import BUILD_ARCH, NATIVE, Container


@pytest.fixture(scope="module")
def supported_host():
    container = Container(harness.image_tag("debian12-%s" % NATIVE), systemd=True)
    yield container
    container.remove()


@pytest.fixture(scope="module")
def unsupported_host():
    container = Container(harness.image_tag("debian-testing-%s" % NATIVE), systemd=False)
    yield container
    container.remove()


@pytest.fixture(scope="session")
def prepared_image():
    """This machine's Debian 12 after prepare.yml with the fixture vLLM repository staged: the build
    and serve tests start from what prepare.yml leaves on a host instead of each re-running apt. The
    harness rebuilds it only when its inputs changed (`make integration` asks before pytest starts;
    its lock makes a second xdist worker wait for the first and then find the image current)."""
    return harness.build_prepared_image()


@pytest.fixture(scope="session")
def build_image():
    """The same prepared Debian 12, for BUILD_ARCH."""
    return harness.build_prepared_image(BUILD_ARCH)


# With BUILD_ARCH emulated, the build lifecycle takes longest: collected first, pytest-xdist hands it
# out first, and its worker also builds that architecture's prepared image while the other worker runs
# the native files. The fleet test, which needs that image too, comes last.
COLLECTION_ORDER = {"test_build_lifecycle.py": 0, "test_build_fleet.py": 2}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: COLLECTION_ORDER.get(item.path.name, 1))
