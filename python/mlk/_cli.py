"""The `mlk` command of an installed package (pip install .): runs the mlk
binary the wheel carries in mlk/bin, with the same arguments, exit status and
streams, as if it were called directly."""
import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "mlk")
    if not os.access(exe, os.X_OK):
        sys.stderr.write("mlk: %s is missing; this mlk package has no command (reinstall it with pip install .)\n"
                         % exe)
        return 127
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
