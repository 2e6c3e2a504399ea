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


# Longest files first, so that pytest-xdist (--dist loadfile) hands them out first and no worker is left
# alone with a long file at the end: measured at stop 26 (2 workers), serve lifecycle about 690 s, model
# sources 420 s, the build files 190-260 s each; the others under 150 s. With BUILD_ARCH emulated
# (`make build-arm64`) the build lifecycle is the longest. The fleet test, which needs BUILD_ARCH's
# prepared image, comes last.
COLLECTION_ORDER = {"test_serve_lifecycle.py": 0, "test_model_sources.py": 1, "test_build_sources.py": 2,
                    "test_build_lifecycle.py": 0 if BUILD_ARCH != harness.NATIVE else 3,
                    "test_build_adopted_and_ready_made.py": 4, "test_build_fleet.py": 9}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: COLLECTION_ORDER.get(item.path.name, 5))
