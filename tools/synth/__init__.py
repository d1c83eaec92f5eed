"""`python -m tools.synth images|video ...`: the command line of the synthetic scene renderer.

The renderer itself is `tools.kit.synth` (the kit: tests, the demo and the lab render their scenes and
clips with it); this package only parses the command and writes the files. Options and the ground truth's
conventions: `tools/kit/synth/__init__.py`.
"""
