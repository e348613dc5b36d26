"""Example programs for the ``tun`` function (run as ``python -m sfclab.functions.examples.X``).

- :mod:`.tun_count`  forward every packet unchanged and count them
"""
