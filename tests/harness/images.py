"""The test images: Debian systemd images built here with debootstrap (no registry is reachable from CI)
and imported into rootful podman, each labelled with the digest of its recipe and rebuilt only when it
changes; and booting a container made from one."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.machine import debian_mirror, ensure_binfmt, log, native_arch, require_root, run


RECIPE_LABEL = "org.arm-inference.recipe"
IMAGE_PREFIX = "localhost/arm-inference"
_SYSTEMD_PACKAGES = ["python3", "systemd", "systemd-sysv", "dbus", "sudo"]

# Each recipe is hashed into the image label; change a recipe (or BUILDER_VERSION when the build
# steps below change) and the next run rebuilds that image.
BUILDER_VERSION = 2
IMAGES = {
    "debian12-arm64": {"suite": "bookworm", "arch": "arm64", "include": _SYSTEMD_PACKAGES},
    "debian13-arm64": {"suite": "trixie", "arch": "arm64", "include": _SYSTEMD_PACKAGES},
    "debian12-amd64": {"suite": "bookworm", "arch": "amd64", "include": _SYSTEMD_PACKAGES},
    # vLLM's x86_64 source build needs GCC >= 12.3 (Debian 12 has 12.2): `make real-build` compiles here.
    "debian13-amd64": {"suite": "trixie", "arch": "amd64", "include": _SYSTEMD_PACKAGES},
    # A real OS the roles do not support (Debian testing), for the "unsupported OS" tests.
    "debian-testing-amd64": {"suite": "testing", "arch": "amd64", "include": ["python3", "sudo"]},
    "debian-testing-arm64": {"suite": "testing", "arch": "arm64", "include": ["python3", "sudo"]},
}


def image_tag(name):
    return "%s/%s:latest" % (IMAGE_PREFIX, name)


def recipe_digest(name):
    recipe = dict(IMAGES[name], builder=BUILDER_VERSION)
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def current_digest(name):
    return image_label(image_tag(name), RECIPE_LABEL)


def build_image(name, mirror):
    recipe = IMAGES[name]
    digest = recipe_digest(name)
    if current_digest(name) == digest:
        log("%s is current (recipe %s)" % (image_tag(name), digest))
        return name, 0.0
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="arm-inference-%s-" % name, dir="/var/tmp"))
    rootfs = workdir / "rootfs"
    try:
        debootstrap_cmd = [
            "debootstrap",
            "--arch=%s" % recipe["arch"],
            "--variant=minbase",
            "--include=%s" % ",".join(recipe["include"]),
            recipe["suite"],
            str(rootfs),
            mirror,
        ]
        log("$ " + " ".join(debootstrap_cmd))
        if subprocess.run(debootstrap_cmd, stdout=subprocess.DEVNULL, check=False).returncode != 0:
            log_file = rootfs / "debootstrap" / "debootstrap.log"
            tail = log_file.read_text(errors="replace").splitlines()[-30:] if log_file.exists() else []
            sys.exit("harness: debootstrap of %s failed; last lines of its log:\n%s" % (name, "\n".join(tail)))
        # A container gets its identity at first boot; an empty machine-id lets systemd create one.
        (rootfs / "etc" / "machine-id").write_text("")
        # binfmt_misc is not namespaced: systemd-binfmt in a privileged container flushes the host's
        # registrations (qemu-aarch64 included) at boot and stop, killing every emulated process.
        mask = rootfs / "etc" / "systemd" / "system" / "systemd-binfmt.service"
        mask.parent.mkdir(parents=True, exist_ok=True)
        if not mask.is_symlink():
            mask.symlink_to("/dev/null")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        run(
            [
                "podman",
                "import",
                "--arch",
                recipe["arch"],
                "--change",
                'CMD ["/lib/systemd/systemd"]',
                "--change",
                "LABEL %s=%s" % (RECIPE_LABEL, digest),
                "-",
                image_tag(name),
            ],
            stdin=tar.stdout,
            stdout=subprocess.DEVNULL,
        )
        if tar.wait() != 0:
            raise subprocess.CalledProcessError(tar.returncode, "tar")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.monotonic() - started
    log("built %s in %.0f s" % (image_tag(name), elapsed))
    return name, elapsed


def build_images(args):
    require_root()
    names = args.names or list(IMAGES)
    unknown = [name for name in names if name not in IMAGES]
    if unknown:
        sys.exit("harness: unknown image(s) %s; known: %s" % (", ".join(unknown), ", ".join(IMAGES)))
    mirror = debian_mirror()
    ensure_binfmt()
    # Two at a time: debootstrap is part download, part (emulated) dpkg work, and we have 2 cores.
    # Emulated (foreign) builds take several times longer, so they start first.
    names = sorted(dict.fromkeys(names), key=lambda name: IMAGES[name]["arch"] == native_arch())
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda name: build_image(name, mirror), names))
    for name, elapsed in results:
        log("image %-16s %s" % (name, "built in %.0f s" % elapsed if elapsed else "cached"))


def podman_output(*args):
    return subprocess.run(["podman"] + list(args), capture_output=True, text=True, check=True).stdout.strip()


def image_label(tag, label):
    result = subprocess.run(["podman", "image", "inspect", "--format", "{{index .Config.Labels \"%s\"}}" % label, tag],
                            capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


# Emulated (aarch64) systemd on a busy 2-core machine can take a minute to boot; a native one, seconds.
BOOT_TIMEOUT = 180


def boot_container(name):
    """Wait for systemd in a container to finish booting, then share mounts as systemd expects of a
    container (credentials, LoadCredential=, stay invisible under podman's private propagation)."""
    deadline = time.monotonic() + BOOT_TIMEOUT
    while time.monotonic() < deadline:
        state = subprocess.run(["podman", "exec", name, "systemctl", "is-system-running"], capture_output=True, text=True,
                               check=False).stdout.strip()
        # Containers always have a few units that cannot start, hence "degraded"; it must just be final.
        if state in ("running", "degraded"):
            break
        time.sleep(1)
    else:
        sys.exit("harness: systemd in %s did not finish booting in %d s (state %r)" % (name, BOOT_TIMEOUT, state))
    run(["podman", "exec", name, "mount", "--make-rshared", "/"])


def list_images(_args):
    for name, recipe in IMAGES.items():
        print("%-16s %-40s %s" % (name, image_tag(name), json.dumps(recipe)))
