import sys

from entrypoints.settings.markdown import render

sys.stdout.write(render())
