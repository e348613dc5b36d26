"""Example programs for the ``tun`` function (run as ``python -m sfclab.functions.examples.X``)."""
