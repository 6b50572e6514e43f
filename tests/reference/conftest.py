import pathlib
import sys

# the reference model is a plain module next to its tests
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
