"""What every Python benchmark does first: install the programs it runs (install-deps.sh)."""
import os, subprocess


def install():
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run(['bash', os.path.join(here, 'install-deps.sh')], check=True)
