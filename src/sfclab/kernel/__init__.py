"""The ground floor: the kernel and OVSDB as sfclab talks to them.

- :mod:`sfclab.kernel.netns`      network namespaces: make, enter, delete, run programs inside,
                                   find and end their processes by PID
- :mod:`sfclab.kernel.nlbatch`    rtnetlink requests batched into one ``sendmsg`` per namespace
- :mod:`sfclab.kernel.ethtool`    offloads (tso, gso, gro, tx-checksum) by ioctl
- :mod:`sfclab.kernel.ovs`        Open vSwitch daemons and ``ovs-vsctl`` transactions
- :mod:`sfclab.kernel.cgroups`    cgroup v1 controllers: make, write limits, move processes in,
                                   read figures, remove (only what carries its owner's mark)
- :mod:`sfclab.kernel.bpf`        eBPF maps through bpf(2): open a pinned map, read, write
- :mod:`sfclab.kernel.btf`        the types a compiled eBPF object declares, read from its BTF
- :mod:`sfclab.kernel.cpus`       online CPUs, and where a namespace's receive processing runs
- :mod:`sfclab.kernel.droptrace`  the kernel's packet drops in given namespaces, by reason
- :mod:`sfclab.kernel.stall`      how long given threads were kept from running once they had
                                   work (a chain's first hop held by its machine)
- :mod:`sfclab.kernel.linehelper` the native helpers that hold eBPF programs for their life and
                                   answer a line for a line (the two above)
- :mod:`sfclab.kernel.process`    this process: the children it ends on exit, interrupts never lost
- :mod:`sfclab.kernel.podman`     containers run by podman through sfclab's own configuration:
                                   run, remove by ID, find by label, inspect, look into images
- :mod:`sfclab.kernel.sysfs`      a namespace's sysfs held read-write by a marked mount of its
                                   own (beside a container's read-only one), the mount table
- :mod:`sfclab.kernel.image_recipes`  the image recipes (``images/<name>/``) and each one's tag,
                                   its version from the recipe's content
- :mod:`sfclab.kernel.image_checkout` what a recipe takes from this checkout (its ``checkout``
                                   file: sfclab, its native tools, Python packages), staged
                                   into its build context
- :mod:`sfclab.kernel.image_build`    build (cached) and list those images with mmdebstrap and
                                   podman, through a :class:`~sfclab.kernel.image_build.Runner`
- :mod:`sfclab.kernel.kmsg`       the kernel's log, read without consuming it: memory cgroups'
                                   OOM kills

Nothing here imports any other part of sfclab but :mod:`sfclab.errors`; everything above reaches
the kernel through these modules.
"""
