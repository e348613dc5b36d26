"""Realization: a plan becomes kernel objects (netlink through pyroute2, OVSDB through one
ovs-vsctl transaction), every object journaled before it is made and marked as the lab's.

- :mod:`.lifecycle`     ``up``, ``down`` and ``ls``: a lab's life, by name
- :mod:`.kinds`         the kind table: every node kind (:mod:`.nodes`) and link form
                        (:mod:`.links`), and the lab-file loaders bound to it
- :mod:`.part`          the shape every node kind and link form shares, called at each stage
- :mod:`.build`         plan -> kernel objects, stage by stage; :mod:`.step` names the object
                        a failure was making
- :mod:`.journal`       the journal entries of every part, written before anything is made
- :mod:`.change`        a change to a running lab (the objects added nodes bring), journaled
                        and made by the same parts and engine as ``up``
- :mod:`.state`         the state journal: what a lab owns, on disk
- :mod:`.ownership`     each kind of journal entry and the proof of ownership its object must show
- :mod:`.teardown`      remove exactly what the journal names and the marks confirm
- :mod:`.inspect`       what a lab is, read live from the kernel and OVSDB
- :mod:`.functions`     a plan's function nodes as objects
- :mod:`.needs`         what a host needs for its part, checked there before anything is made
- :mod:`.hosts`         hosts as a part of the build: contexts, the underlay, CPUs and memory
- :mod:`.tenancy`       tenants in shared nodes: tables, rules, zones and marks
- :mod:`.steering`      the SFC data plane as a part of the build: its eBPF programs;
                        :mod:`.dataplane` its bpffs directory, maps and entries, whose bytes
                        :mod:`.contract` holds against the C headers
- :mod:`.containers`    nodes' containers (``image``): a stage that starts them in their
                        namespaces, shows their state and removes them by ID
- :mod:`.moved`         lab-file function nodes whose function ``chain migrate`` moved
- :mod:`.runtime`       the host runtime, one interface (``local``: this machine and hosts
                        emulated in it; ``ssh``: real machines, each building its part with
                        its agent); :mod:`.lifecycle` and :mod:`.inspect` ask it and never
                        tell the runtimes apart themselves
- :mod:`.remote`        a lab on real hosts driven over SSH: this machine's side of ``up`` and
                        ``down``, called by the ``ssh`` runtime only
- :mod:`.agent`         a real host's side, run there over SSH, with :mod:`.agent_scan` (what
                        the host offers), :mod:`.agent_sfc` (its share of the data plane) and
                        :mod:`.agent_serve` (the agent kept running, a forked run per request)
"""
