"""Pure functions from a validated lab to a concrete plan: names, addresses, routes.
Nothing here touches the kernel, so all of it is tested without root.

``sfclab.plan.build.build_plan(lab) -> Plan``; ``sfclab.plan.model.Plan`` is plain data.

- :mod:`.model`            the plan: every kernel and OVSDB object a lab needs, as dataclasses
- :mod:`.steering`         the steering plan (``Plan.steering``): node ids, labels, directions
- :mod:`.build`            lab -> plan: every object named, addressed and routed
- :mod:`.names`            names of kernel objects, within the kernel's 15 characters
- :mod:`.addressing`       one subnet per segment from the lab's pool
- :mod:`.routing`          static routes along shortest paths
- :mod:`.paths`            the hops a packet takes through a plan, by longest prefix
- :mod:`.marks`            the packet mark's layout in a lab node
- :mod:`.tenancy`          tenants: address spaces, routes and shared nodes' tables
- :mod:`.hosts`            hosts: contexts, the underlay, tunnels, MTU and CPUs
- :mod:`.split`            the plan split per host: what each host makes of the lab
- :mod:`.placement`        function instances placed on hosts by free CPU and memory
- :mod:`.tunnels`          tunnels of instances added on another host than their attach node
- :mod:`.sfc`              chains -> the steering plan: paths, labels, stacks, classifier entries
- :mod:`.arrivals`         where a chain's frames arrive: the forwarder's interfaces, NAPI by GRO
- :mod:`.labels`           the data plane's numbering: label stack entries, protocols, families
- :mod:`.encap`            a chain's on-wire encodings (mpls, nsh, srv6), one table entry each
- :mod:`.srv6`             SRv6 SIDs: a node's locator :: the label, the segment list of a path
- :mod:`.sfc_hosts`        the SFC data plane split over hosts that are separate machines
- :mod:`.flowhash`         the classifier's flow hash, as the data plane computes it
- :mod:`.maglev`           slot tables by Maglev hashing: failover moves only the dead's flows
- :mod:`.classifier_rows`  classifier entries in integers, for bulk loads
- :mod:`.chainpaths`       paths, labels and free table space on a running lab's plan
- :mod:`.chainadd`         a chain added to a running lab, planned against its saved plan
- :mod:`.diff`             what a plan loses against another: a change's removal, as a plan
- :mod:`.migration`        a migration's plans: the clone, the switch, the removal
- :mod:`.graph`            a lab as a picture: Mermaid or Graphviz dot text
- :mod:`.containers`       a node's ``image`` as the container the plan gives it
"""
