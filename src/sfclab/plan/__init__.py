"""Pure functions from a validated lab to a concrete plan: names, addresses, routes.
Nothing here touches the kernel, so all of it is tested without root.

``sfclab.plan.build.build_plan(lab) -> Plan``; ``sfclab.plan.model.Plan`` is plain data.
"""
