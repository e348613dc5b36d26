"""Hosts: the machines a lab spans, and what sfclab makes in each host's context.

A host's *context* is where sfclab works on that host: its root context.  For an emulated host
(:class:`~sfclab.hosts.context.EmulatedHost`) it is a namespace of the lab's that plays the
host's root context, so nothing of it ever touches this machine's real root namespace.  Every
object made in a host context (bridges, VXLAN devices, shortbridges, OVS, shapers) is made by
code that talks to the kernel only through a :class:`~sfclab.hosts.context.HostContext`, so
a host reached over SSH runs the same code with its own root context
(:class:`~sfclab.hosts.context.OwnRoot`, in its agent, :mod:`sfclab.realize.agent`).

Modules: :mod:`.context` (contexts), :mod:`.attach` (how a hosted link meets its node, one
entry per ``attach`` kind), :mod:`.ovs` (an OVS instance per host context), :mod:`.shaping`
(a link's rate), :mod:`.cgroups` (a host's CPUs and memory), :mod:`.ssh` (reaching a real
host's agent over SSH), :mod:`.ssh_pool` (SSH connections kept between calls).
"""
