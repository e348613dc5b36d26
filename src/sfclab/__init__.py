"""sfclab: build, steer and benchmark service function chains of namespaced network functions.

Data flows one way: spec -> plan -> realize -> measure -> store -> analyze.

- :mod:`sfclab.spec`        lab and experiment files, validated (errors name the file and the place)
- :mod:`sfclab.plan`        pure functions from a spec to a concrete plan (names, addresses, routes)
- :mod:`sfclab.realize`     plan -> kernel objects (netlink, OVSDB), the state journal, teardown
- :mod:`sfclab.functions`   one module per network function, picked by name
- :mod:`sfclab.traffic`     iperf3 and native generator drivers, NDR/PDR search, latency, CPU
- :mod:`sfclab.experiments` sweeps, the SQLite store, statistics, plots, reports
"""

__version__ = "0.1.0"
