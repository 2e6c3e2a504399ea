"""P2: fan-out. Provision one fresh Debian 12 container (prepare.yml, then build.yml compiling the
fixture vLLM source tree with a fresh controller wheel cache), then three fresh containers of the
same class together in one play, again with a fresh cache.

Compiles are counted on the hosts: a host compiled when its build directory holds build.log; a host
that installed another's wheel records that host as `builder` in build.json (as
tests/containers/test_build_fleet.py checks). The script exits 1 unless each provisioning compiled
exactly once, every other host installed the builder's wheel, and all hosts share one identity.
Prints the compile counts, the wall times of prepare.yml and build.yml for 1 and for 3 hosts, and
their ratios.
"""

from __future__ import annotations

import json

from provisioning_bench import BUILD_SETUP, BenchmarkFailure, Workspace, parse_arguments, print_table, ratio, run_benchmark, say


def build_of(host):
    """(identity, compiled here, builder named in build.json) of the release /opt/vllm/current points at."""
    release_name = host.exec("readlink /opt/vllm/current").stdout.strip()
    release = host.exec("cat /opt/vllm/%s/release.json" % release_name)
    if not release_name or release.returncode != 0:
        raise BenchmarkFailure("%s has no current vLLM release after build.yml" % host.name)
    identity = json.loads(release.stdout)["identity"]
    compiled = host.exec("test -f /opt/vllm/builds/%s/build.log" % identity).returncode == 0
    record = json.loads(host.exec("cat /opt/vllm/builds/%s/build.json" % identity).stdout or "{}")
    return identity, compiled, record.get("builder")


def provision(workspace, count):
    """Prepare and build `count` fresh hosts in one play each; return (prepare run, build run, compiles)."""
    label = "%d host%s" % (count, "" if count == 1 else "s")
    run_directory = workspace.subdirectory(label.replace(" ", "-"))
    hosts = workspace.start_hosts(count, fixture_repo=True)
    variables = dict(BUILD_SETUP, vllm_build_wheel_cache_dir=str(run_directory / "wheels"))
    prepare = workspace.run_playbook(hosts, "prepare.yml", variables, "prepare, %s" % label, run_directory)
    build = workspace.run_playbook(hosts, "build.yml", variables, "build, %s" % label, run_directory)

    builds = {host.name: build_of(host) for host in hosts}
    compilers = [name for name, (dummy, compiled, dummy_builder) in builds.items() if compiled]
    identities = {identity for identity, dummy, dummy_builder in builds.values()}
    for name, (identity, compiled, builder) in sorted(builds.items()):
        say("%s: identity %s, %s" % (name, identity[:12], "compiled" if compiled else "installed the wheel built by %s" % builder))
    if len(identities) != 1:
        raise BenchmarkFailure("%s: hosts of one class got different build identities: %s" % (label, sorted(identities)))
    if len(compilers) != 1:
        raise BenchmarkFailure("%s: %d compiles, expected 1 (%s)" % (label, len(compilers), ", ".join(compilers) or "none"))
    strays = [name for name, (dummy, compiled, builder) in builds.items() if not compiled and builder != compilers[0]]
    if strays:
        raise BenchmarkFailure("%s: %s did not install %s's wheel" % (label, ", ".join(strays), compilers[0]))
    workspace.remove(hosts)
    return prepare, build, len(compilers)


def benchmark():
    args = parse_arguments(__doc__)
    with Workspace(args.arch, args.keep) as workspace:
        one = provision(workspace, 1)
        three = provision(workspace, 3)

    print("\nP2 fan-out, debian12-%s containers of one class, fixture vLLM source build" % args.arch)
    rows = []
    for stage, index in (("prepare.yml", 0), ("build.yml", 1)):
        rows.append([stage, "%.1f" % one[index].seconds, "%.1f" % three[index].seconds,
                     "%.2f" % ratio(three[index].seconds, one[index].seconds)])
    total_one = one[0].seconds + one[1].seconds
    total_three = three[0].seconds + three[1].seconds
    rows.append(["prepare + build", "%.1f" % total_one, "%.1f" % total_three, "%.2f" % ratio(total_three, total_one)])
    rows.append(["compiles", one[2], three[2], ""])
    print_table(["", "1 host (s)", "3 hosts (s)", "3 / 1"], rows)


if __name__ == "__main__":
    run_benchmark(benchmark)
