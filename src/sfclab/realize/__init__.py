"""Realization: a plan becomes kernel objects (netlink through pyroute2, OVSDB through one
ovs-vsctl transaction), every object journaled before it is made and marked as the lab's."""
