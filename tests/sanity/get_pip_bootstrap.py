"""Stand-in for ansible-test's get-pip bootstrap script (https://ci-files.testing.ansible.com/...).

Why it exists: ansible-test downloads get-pip-<version>.py from ci-files.testing.ansible.com to put
pip into each sanity-test virtual environment, and that host is unreachable from our CI machines.
ansible-test accepts a pre-cached copy at ~/.ansible/test/cache/get_pip_<version>.py, so
tests/sanity/run_sanity.py installs this file there. It does what get-pip.py does: put pip into
the running interpreter's environment and then install what it was asked for (the real pip,
setuptools and wheel from PyPI, at the versions ansible-test passes). Test tooling only; never
shipped in the collection.
"""

import subprocess
import sys

subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
arguments = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install"] + arguments)
