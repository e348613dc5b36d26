"""Realization: a plan becomes kernel objects (netlink through pyroute2, OVSDB through one
ovs-vsctl transaction), every object journaled before it is made and marked as the lab's.

Where the objects are made is the lab's host runtime (:mod:`.runtime`: ``local``, this machine
and hosts emulated in it; ``ssh``, real machines each building its part with its agent,
:mod:`.agent`, :mod:`.remote`); :mod:`.lifecycle` (``up``, ``down``, ``exec``) and
:mod:`.inspect` ask it and never tell the runtimes apart themselves.
"""
