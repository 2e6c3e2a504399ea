"""Fleet scale, measured (issue 29, item 4): `make fleet-scale` (`python3 tests/harness fleet-scale`), outside CI.

site.yml over SSH as the README's fleet guidance has it (login user `admin`, sudo with a password, key only,
pipelining on, so sudoers without requiretty; forks = the number of hosts, strategy linear), on 1..N hosts:

0. Unless FLEET_FRESH=no or the strategy is Mitogen's (its first converge fails without python3-apt): one SSH
   host from the plain Debian 12 image, site.yml's real first converge (the OS packages from Debian's archive) and
   its re-run: P1 as a new cloud host sees it. Removed after.
1. One SSH host from the prepared Debian 12 image with the wheelhouse (ee.ssh_host: tests/playbooks/ssh_host.yml),
   so no host compiles or downloads. site.yml with the local target's variables (inventories/local/group_vars: the
   real vLLM wheel, the tiny model, the gateway) converges it: the "first converge on one host". The resident memory
   of the serving vLLM (the unit's process tree) is measured, then the converged re-run with serving.
2. The same host without serving (vllm_serve_instances: [] stops and removes the instance, vllm_gateway_enabled:
   false the gateway), converged and re-run: the one-host row without serving.
3. That host is committed as the fleet image (no serving unit in it), and for each size of FLEET_SIZES (default
   "1 8 16 32") as many hosts start from it, each with its own SSH port on 127.0.0.1: a first run (the clones'
   host names and machine ids are new), then the measured converged re-run. The fleet serves only when every size
   fits this machine's memory at the measured RSS (FLEET_SERVE=auto; yes/no force it); the table says which.
   FLEET_STRATEGY (default linear; free, or Mitogen's mitogen_linear from requirements-fleet.txt) and
   FLEET_PIPELINING=off measure the alternatives.

Every run's wall time, controller CPU (user+sys of the ansible-playbook process tree, reaped children's rusage) and
changed count are kept; a converged re-run that changes anything fails the target. The results (markdown, JSON, an
SVG of wall time against hosts, the logs) go to .cache/fleet-scale/. Every container started here is removed, and
the fleet image with them, also on failure.
"""

from __future__ import annotations

import json
import os
import re
import resource
import secrets
import shutil
import subprocess
import sys
import time

from harness.containers import podman, run_playbook
from harness.ee import ssh_container, ssh_host, ssh_host_vars
from harness.images import image_tag
from harness.machine import CACHE_DIR, REPO_ROOT, link_collection, log, native_arch, require_root

RESULTS_DIR = CACHE_DIR / os.environ.get("FLEET_RESULTS", "fleet-scale")
SITE = str(REPO_ROOT / "playbooks" / "site.yml")
# FLEET_IMAGE names another tag, so that two measurements on one machine do not remove each other's image.
FLEET_IMAGE = os.environ.get("FLEET_IMAGE", "localhost/arm-inference/fleet-scale:latest")
# What the fleet hosts run when they do not serve: no vLLM instance (the role stops and removes them) and no
# gateway (removed likewise); everything else of site.yml runs as it does with serving.
NO_SERVING = {"vllm_serve_instances": [], "vllm_gateway_enabled": False}
SERVE_UNIT = "vllm-serve-main.service"
# The share of this machine's available memory the fleet's vLLM servers may take together.
MEMORY_SHARE = 0.5
TOP_TASKS = 5
FRESH_FIRST = "first converge, fresh Debian 12 (one host)"
FRESH_RERUN = "converged re-run, fresh Debian 12 (one host)"

RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)"
                   r"\s+rescued=(\d+)\s+ignored=(\d+)")
# ansible.posix.profile_tasks' summary after a line of "=": "<role> : <task> ------- 12.34s", the dashes down to
# one where the name is long.
PROFILE = re.compile(r"^(.+?) -+ (\d+(?:\.\d+)?)s\s*$")


# Pure parts (tests/unit/harness/test_fleet.py).

def fleet_sizes(text):
    """FLEET_SIZES ("1 8 16 32") as sorted distinct positive integers; exits naming the variable otherwise."""
    try:
        sizes = sorted({int(item) for item in text.replace(",", " ").split()})
    except ValueError:
        sizes = []
    if not sizes or sizes[0] < 1:
        sys.exit("harness: FLEET_SIZES=%r must list host counts of 1 or more, e.g. \"1 8 16 32\"" % text)
    return sizes


def parse_recap(output):
    """{host: {ok, changed, unreachable, failed, skipped, rescued, ignored}} from a PLAY RECAP."""
    keys = ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored")
    hosts = {}
    for line in output.splitlines():
        match = RECAP.match(line.strip())
        if match:
            hosts[match.group(1)] = dict(zip(keys, (int(value) for value in match.groups()[1:])))
    return hosts


def parse_profile(output, top=TOP_TASKS):
    """The `top` slowest tasks (None: all) of profile_tasks' summary as [{"task", "seconds"}], slowest first."""
    summary = output.rsplit("\n=====", 1)[-1] if "\n=====" in output else ""
    tasks = [{"task": match.group(1).strip(), "seconds": float(match.group(2))}
             for match in (PROFILE.match(line) for line in summary.splitlines()) if match]
    return sorted(tasks, key=lambda task: -task["seconds"])[:top]


def per_role(tasks):
    """{role: [seconds, tasks]} over a profile's tasks ("<collection>.<role> : <task>"; others under their name),
    largest first: where a run's time goes."""
    roles = {}
    for task in tasks:
        role = task["task"].split(" : ", 1)[0].rsplit(".", 1)[-1] if " : " in task["task"] else task["task"]
        entry = roles.setdefault(role, [0.0, 0])
        entry[0] = round(entry[0] + task["seconds"], 2)
        entry[1] += 1
    return dict(sorted(roles.items(), key=lambda item: -item[1][0]))


def tree_rss_kib(stat_text, root, page_kib=4):
    """The resident memory (KiB) of process `root` and all its descendants, from the /proc/PID/stat lines of a
    host's processes (`cat /proc/[0-9]*/stat`: pid, (comm), state, ppid, ..., rss in pages as the 24th field)."""
    children, rss = {}, {}
    for line in stat_text.splitlines():
        head, paren, rest = line.rpartition(")")
        fields = rest.split()
        if not paren or len(fields) < 22 or not head.split(" ", 1)[0].isdigit():
            continue
        pid, ppid = int(head.split(" ", 1)[0]), int(fields[1])
        rss[pid] = int(fields[21]) * page_kib
        children.setdefault(ppid, []).append(pid)
    total, pending = 0, [root] if root in rss else []
    while pending:
        pid = pending.pop()
        total += rss[pid]
        pending.extend(children.get(pid, []))
    return total


def fleet_serves(mode, rss_kib, sizes, available_kib):
    """(serve?, why) for the fleet rows: FLEET_SERVE=yes/no decides; auto serves when the largest size's servers
    fit MEMORY_SHARE of the available memory at the measured RSS."""
    needed = rss_kib * max(sizes)
    budget = available_kib * MEMORY_SHARE
    if mode in ("yes", "no"):
        return mode == "yes", "FLEET_SERVE=%s" % mode
    if mode != "auto":
        sys.exit("harness: FLEET_SERVE=%r must be auto, yes or no" % mode)
    if not rss_kib:
        return False, "no serving vLLM was measured"
    fits = needed <= budget
    return fits, "%d hosts x %.2f GiB RSS = %.1f GiB %s %.0f%% of the %.1f GiB available" % (
        max(sizes), rss_kib / 2 ** 20, needed / 2 ** 20, "fits in" if fits else "exceeds",
        MEMORY_SHARE * 100, available_kib / 2 ** 20)


def run_row(label, hosts, serving, wall, cpu, recap, profile):
    """One measured run: its figures in total and per host."""
    changed = sum(counts["changed"] for counts in recap.values())
    return {"run": label, "hosts": hosts, "serving": serving, "wall_s": round(wall, 1), "controller_cpu_s": round(cpu, 1),
            "wall_per_host_s": round(wall / hosts, 2), "cpu_per_host_s": round(cpu / hosts, 2), "changed": changed,
            "top_tasks": profile}


def ratios(rows):
    """P1 (converged re-run / first converge, one host, serving) and the largest fleet's re-run against one host's
    (the fleet rows' re-runs); None where a figure is missing."""
    by_run = {(row["run"], row["serving"]): row for row in rows if row["hosts"] == 1}
    first = by_run.get(("first converge (one host)", True))
    rerun = by_run.get(("converged re-run (one host)", True))
    fleet = sorted((row for row in rows if row["run"] == "fleet re-run"), key=lambda row: row["hosts"])
    fresh = [by_run.get((FRESH_FIRST, True)), by_run.get((FRESH_RERUN, True))]
    result = {"p1": round(rerun["wall_s"] / first["wall_s"], 3) if first and rerun else None,
              "p1_fresh": round(fresh[1]["wall_s"] / fresh[0]["wall_s"], 3) if all(fresh) else None,
              "largest_vs_one": None, "largest": None}
    if fleet and fleet[0]["hosts"] == 1 and len(fleet) > 1:
        result["largest"] = fleet[-1]["hosts"]
        result["largest_vs_one"] = round(fleet[-1]["wall_s"] / fleet[0]["wall_s"], 2)
    return result


def table_markdown(report):
    """The table of item 4 with what it covers and the ratios, as markdown."""
    lines = ["# Fleet scale: site.yml over SSH", ""]
    if not report.get("complete", True):
        lines += ["PARTIAL: the run stopped before every size of %s was measured (see the harness's output)."
                  % " ".join(str(size) for size in report["sizes"]), ""]
    lines += ["Machine: %s, %d CPUs, %.1f GiB. SSH as `admin` with sudo (password), key only, pipelining %s, forks = "
              "hosts, strategy %s." % (report["cpu"], report["cpus"], report["memory_gib"],
                                       "on" if report["pipelining"] else "off", report["strategy"]),
              "", "Serving vLLM (tiny model) RSS on one host: %s." % (
                  "%.2f GiB" % (report["serve_rss_kib"] / 2 ** 20) if report["serve_rss_kib"] else "not measured"),
              "Fleet rows %s (%s). The one-host rows were measured both with and without serving." % (
                  "include serving" if report["fleet_serving"] else "EXCLUDE serving: no vLLM instance, no gateway",
                  report["fleet_serving_why"]), "",
              "| run | hosts | serving | wall s | controller CPU s | wall/host s | CPU/host s | changed | slowest tasks |",
              "|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for row in report["rows"]:
        tasks = "; ".join("%s %.1fs" % (task["task"], task["seconds"]) for task in row["top_tasks"][:3])
        lines.append("| %s | %d | %s | %.1f | %.1f | %.2f | %.2f | %d | %s |" % (
            row["run"], row["hosts"], "yes" if row["serving"] else "no", row["wall_s"], row["controller_cpu_s"],
            row["wall_per_host_s"], row["cpu_per_host_s"], row["changed"], tasks.replace("|", "/")))
    figures = report["ratios"]
    lines += ["", "P1 (converged re-run / first converge, one host, serving): %s (goal <= 0.10)." % figures["p1"]]
    if figures.get("p1_fresh") is not None:
        lines.append("P1 of a fresh Debian 12 host (its re-run / its first converge, OS packages included): %s."
                     % figures["p1_fresh"])
    if figures["largest_vs_one"] is not None:
        lines.append("Fleet re-run on %d hosts / on 1 host: %s (goal for 32: <= 2)." % (
            figures["largest"], figures["largest_vs_one"]))
    for name, roles in (report.get("seconds_per_role") or {}).items():
        if name.startswith(("converged-re-run", "fleet-re-run")):
            lines.append("%s, seconds (tasks) per role: %s." % (name[:-len(".log")], ", ".join(
                "%s %.0f (%d)" % (role, seconds, count) for role, (seconds, count) in roles.items())))
    return "\n".join(lines) + "\n"


def wall_svg(rows):
    """An SVG of the fleet re-runs' wall time against hosts (vllm_load.scatter_svg, the collection's chart)."""
    sys.path.insert(0, str(CACHE_DIR / "collections"))
    from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_load import scatter_svg

    points = [{"label": "%d host%s: %.0f s" % (row["hosts"], "" if row["hosts"] == 1 else "s", row["wall_s"]),
               "x": row["hosts"], "y": row["wall_s"]} for row in rows if row["run"] == "fleet re-run"]
    return scatter_svg(points, "Converged re-run of site.yml over SSH", "hosts", "wall time (s)")


# The measurement.

def fleet_config(path, strategy, pipelining, strategy_plugins=None):
    """The controller's ansible.cfg for every run: the repository's settings that a fleet's own would carry
    (pipelining, on unless FLEET_PIPELINING=off; the task profile; facts not injected as variables), the strategy.
    A Mitogen strategy also needs its plugin directory and no host key check (Mitogen's own SSH options leave the
    inventory's ssh args out, and every fleet container has new host keys)."""
    extra = ("strategy_plugins = %s\nhost_key_checking = False\n" % strategy_plugins) if strategy_plugins else ""
    path.write_text("[defaults]\ninterpreter_python = auto_silent\ninject_facts_as_vars = False\n"
                    "callbacks_enabled = ansible.posix.profile_tasks\nretry_files_enabled = False\nstrategy = %s\n"
                    "%s[ssh_connection]\npipelining = %s\n" % (strategy, extra, pipelining))


def mitogen_strategies(strategy):
    """For FLEET_STRATEGY=mitogen_linear (or another of Mitogen's): Mitogen at requirements-fleet.txt's pin under
    .cache, and the directory of its strategy plugins; None for Ansible's own strategies."""
    if not strategy.startswith("mitogen_"):
        return None
    target = CACHE_DIR / "mitogen"
    stamp = target / "requirements.stamp"
    wanted = (REPO_ROOT / "requirements-fleet.txt").read_text()
    if not stamp.exists() or stamp.read_text() != wanted:
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target",
                        str(target), "-r", str(REPO_ROOT / "requirements-fleet.txt")], check=True)
        stamp.write_text(wanted)
    return target / "ansible_mitogen" / "plugins" / "strategy"


class Fleet:
    """The containers of the measurement, all removed by close()."""

    def __init__(self, workdir, password):
        self.workdir, self.password, self.key = workdir, password, workdir / "id_ed25519"
        self.hosts, self.ports = [], {}
        # Seconds and tasks per role of every run, by its log's name.
        self.roles = {}

    def add(self, host, port):
        self.hosts.append(host)
        self.ports[host.name] = port

    def run(self, label, hosts, variables, must_converge):
        """site.yml over SSH on `hosts` with forks = their number; returns (wall, cpu, recap, profile) and exits
        when it failed, or changed anything where `must_converge`."""
        # Every task in profile_tasks' summary, not its default 20.
        os.environ["PROFILE_TASKS_TASK_OUTPUT_LIMIT"] = "all"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        result = run_playbook(hosts, self.workdir, SITE, dict(variables, ansible_become_password=self.password),
                              options=("--forks", str(len(hosts))),
                              host_vars={host.name: ssh_host_vars(self.ports[host.name], self.key) for host in hosts})
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        name = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
        log_file = RESULTS_DIR / "logs" / ("%s-%d.log" % (name, len(hosts)))
        log_file.write_text(result.stdout + result.stderr)
        recap = parse_recap(result.stdout)
        changed = sum(counts["changed"] for counts in recap.values())
        log("%s on %d host(s): exit %d, %.1f s wall, %.1f s controller CPU, changed=%d (%s)"
            % (label, len(hosts), result.returncode, wall, cpu, changed, log_file))
        bad = [host for host, counts in recap.items() if counts["failed"] or counts["unreachable"]]
        if result.returncode != 0 or bad or len(recap) != len(hosts):
            sys.exit("harness: %s failed on %s (exit %d); see %s:\n%s" % (
                label, ", ".join(bad) or "the run", result.returncode, log_file, result.stdout[-3000:]))
        if must_converge and changed:
            sys.exit("harness: %s changed %d task(s) on a converged fleet (must be 0); see %s" % (label, changed, log_file))
        self.roles[log_file.name] = per_role(parse_profile(result.stdout, top=None))
        return wall, cpu, recap, parse_profile(result.stdout)

    def serve_rss_kib(self, host):
        """RSS of the vLLM unit's process tree on `host`."""
        main = host.exec("systemctl show -p MainPID --value %s" % SERVE_UNIT).stdout.strip()
        if not main.isdigit() or main == "0":
            sys.exit("harness: %s is not running on %s" % (SERVE_UNIT, host.name))
        return tree_rss_kib(host.exec("cat /proc/[0-9]*/stat 2>/dev/null").stdout, int(main),
                            page_kib=os.sysconf("SC_PAGE_SIZE") // 1024)

    def commit(self, host):
        """`host`, shut down cleanly with an empty machine-id (each clone gets its own), as the fleet image."""
        host.exec(": > /etc/machine-id")
        podman("stop", "-t", "60", host.name)
        podman("commit", "--quiet", host.name, FLEET_IMAGE)
        host.remove()
        self.hosts.remove(host)

    def start(self, count):
        for dummy in range(count):
            self.add(*ssh_container(FLEET_IMAGE))
        return list(self.hosts)

    def remove_all(self):
        for host in self.hosts:
            host.remove()
        self.hosts = []

    def close(self):
        self.remove_all()
        podman("rmi", "-f", FLEET_IMAGE, check=False)


def meminfo_kib(key):
    """This machine's /proc/meminfo figure `key` ("MemAvailable", "MemTotal") in KiB."""
    with open("/proc/meminfo", encoding="utf-8") as meminfo:
        return int(next(line for line in meminfo if line.startswith(key + ":")).split()[1])


def machine_figures():
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "unknown")
    return {"cpu": model, "cpus": os.cpu_count(), "memory_gib": round(meminfo_kib("MemTotal") / 2 ** 20, 1)}


def one_host(fleet, rows):
    """The one-host rows (with serving: first converge, re-run; without: re-run); returns the host and the RSS."""
    host, port = ssh_host(fleet.workdir, fleet.password, key=fleet.key, requiretty=False)
    fleet.add(host, port)
    wall, cpu, recap, profile = fleet.run("first converge (one host)", [host], {}, must_converge=False)
    rows.append(run_row("first converge (one host)", 1, True, wall, cpu, recap, profile))
    rss = fleet.serve_rss_kib(host)
    log("serving vLLM on %s: %.2f GiB RSS" % (host.name, rss / 2 ** 20))
    rows.append(run_row("converged re-run (one host)", 1, True,
                        *fleet.run("converged re-run (one host)", [host], {}, must_converge=True)))
    fleet.run("serving off (one host)", [host], NO_SERVING, must_converge=False)
    rows.append(run_row("converged re-run (one host)", 1, False,
                        *fleet.run("converged re-run, no serving (one host)", [host], NO_SERVING, must_converge=True)))
    return host, rss


def fresh_row_wanted(setting, strategy):
    """Whether to measure the fresh host: FLEET_FRESH (yes/no), and never under Mitogen, whose first converge on a
    host without python3-apt fails (the apt module installs it and respawns its interpreter; README)."""
    if setting == "no":
        return False
    if strategy.startswith("mitogen_"):
        log("no fresh-host row with %s: the plain image has no python3-apt, whose install respawns the apt "
            "module's interpreter, which Mitogen does not support" % strategy)
        return False
    return True


def fresh_host(fleet, rows):
    """The P1 of a host as a cloud image gives it: the plain Debian 12 image (Python, systemd and sudo, nothing of
    prepare.yml), set up by ssh_host.yml; site.yml's real first converge (the OS packages from Debian's archive,
    vLLM still from the wheelhouse, nothing compiled) and its converged re-run, both serving. Removed after."""
    host, port = ssh_host(fleet.workdir, fleet.password, key=fleet.key, requiretty=False,
                          image=image_tag("debian12-%s" % native_arch()))
    fleet.add(host, port)
    try:
        for label, must_converge in ((FRESH_FIRST, False), (FRESH_RERUN, True)):
            rows.append(run_row(label, 1, True, *fleet.run(label, [host], {}, must_converge=must_converge)))
    finally:
        fleet.hosts.remove(host)
        host.remove()


def fleet_scale(_args):
    """`tests/harness fleet-scale`: the table, the JSON and the SVG under .cache/fleet-scale/."""
    require_root()
    link_collection(None)
    sizes = fleet_sizes(os.environ.get("FLEET_SIZES", "1 8 16 32"))
    strategy = os.environ.get("FLEET_STRATEGY", "linear")
    pipelining = os.environ.get("FLEET_PIPELINING", "on") != "off"
    shutil.rmtree(RESULTS_DIR, ignore_errors=True)
    (RESULTS_DIR / "logs").mkdir(parents=True)
    workdir = RESULTS_DIR / "work"
    workdir.mkdir()
    shutil.copytree(REPO_ROOT / "inventories" / "local" / "group_vars", workdir / "group_vars")
    fleet_config(workdir / "ansible.cfg", strategy, pipelining, mitogen_strategies(strategy))
    fleet = Fleet(workdir, secrets.token_urlsafe(16))
    rows = []
    # Until the serving decision, the table says none was made; rows measured before a failure are still written.
    report = dict(machine_figures(), pipelining=pipelining, strategy=strategy, sizes=sizes, rows=rows,
                  serve_rss_kib=None, fleet_serving=False, fleet_serving_why="the run stopped before deciding")
    try:
        if fresh_row_wanted(os.environ.get("FLEET_FRESH", "yes"), strategy):
            fresh_host(fleet, rows)
        host, rss = one_host(fleet, rows)
        serving, why = fleet_serves(os.environ.get("FLEET_SERVE", "auto"), rss, sizes, meminfo_kib("MemAvailable"))
        report.update(serve_rss_kib=rss, fleet_serving=serving, fleet_serving_why=why)
        log("fleet rows %s: %s" % ("serve" if serving else "do not serve", why))
        fleet.commit(host)
        variables = {} if serving else NO_SERVING
        for size in sizes:
            inotify_for(size)
            hosts = fleet.start(size)
            fleet.run("fleet first run", hosts, variables, must_converge=False)
            rows.append(run_row("fleet re-run", size, serving,
                                *fleet.run("fleet re-run", hosts, variables, must_converge=True)))
            fleet.remove_all()
            write_results(report, rows, fleet)
    finally:
        fleet.close()
        # What was measured before a failure is kept, and said to be partial.
        if rows:
            write_results(report, rows, fleet)
    print(table_markdown(report))
    log("results in %s (fleet-scale.md, .json, .svg, logs/)" % RESULTS_DIR)


# systemd in a container holds a few inotify instances (systemd, journald, logind, ...); the kernel's default
# of 128 per user lets about 25 such containers boot, and the next ones never finish booting.
INOTIFY_INSTANCES_PER_HOST = 16
INOTIFY_SYSCTL = "/proc/sys/fs/inotify/max_user_instances"


def inotify_for(size):
    """Raise fs.inotify.max_user_instances (never lower it) so that `size` systemd containers and the machine's
    own can boot; said in the log, as ee's /dev/mqueue is."""
    wanted = INOTIFY_INSTANCES_PER_HOST * (size + 8)
    with open(INOTIFY_SYSCTL, encoding="utf-8") as current:
        have = int(current.read())
    if have < wanted:
        log("fs.inotify.max_user_instances %d -> %d for %d systemd containers" % (have, wanted, size))
        with open(INOTIFY_SYSCTL, "w", encoding="utf-8") as limit:
            limit.write(str(wanted))


def write_results(report, rows, fleet):
    report["ratios"] = ratios(rows)
    report["seconds_per_role"] = fleet.roles
    report["complete"] = len([row for row in rows if row["run"] == "fleet re-run"]) == len(report["sizes"])
    (RESULTS_DIR / "fleet-scale.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS_DIR / "fleet-scale.md").write_text(table_markdown(report))
    svg = wall_svg(rows)
    if svg:
        (RESULTS_DIR / "fleet-scale.svg").write_text(svg)
