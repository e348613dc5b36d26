"""sfclab: build, steer and benchmark service function chains of namespaced network functions.

Data flows one way: spec -> plan -> realize -> measure -> store -> analyze.  The packages, in
their layers from the bottom (``pyproject.toml``'s import-linter contract; a layer imports only
those below it):

- :mod:`sfclab.errors`      typed exceptions; the CLI alone turns them into exit codes
- :mod:`sfclab.kernel`      the kernel and OVSDB as sfclab talks to them
- :mod:`sfclab.spec`        lab and experiment files, validated (errors name the file and the place)
- :mod:`sfclab.plan`        pure functions from a spec to a concrete plan (names, addresses, routes)
- :mod:`sfclab.functions`   one module per network function, picked by name
- :mod:`sfclab.hosts`       the machines a lab spans and what is made in each host's context
- :mod:`sfclab.realize`     plan -> kernel objects (netlink, OVSDB), the state journal, teardown
- :mod:`sfclab.traffic`     iperf3 and native generator drivers, NDR/PDR search, latency, CPU
- :mod:`sfclab.live`       chains on a running lab: add, remove, classify, migrate, health
- :mod:`sfclab.api`         the library's front door: a lab to build, use and remove from Python
- :mod:`sfclab.experiments` sweeps, the SQLite store, statistics, plots, reports
- :mod:`sfclab.web`         ``sfclab serve``: the HTTP API and the web view
- :mod:`sfclab.cli`         the ``sfclab`` command: parsing, printing, exit codes
"""

__version__ = "0.1.0"
