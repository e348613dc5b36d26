"""Measurement: iperf3 and native-generator drivers, the NDR/PDR search, latency, CPU.

- :mod:`.measure`      from a typed request to a measurement in a running lab; :mod:`.family`
                       the endpoints' address of the request's family (IPv4 or IPv6)
- :mod:`.result`       the one structured result every measurement returns
- :mod:`.iperf`        iperf3 throughput: N server/client pairs between two namespaces
- :mod:`.generator`    the packet-generator interface every rate measurement is written against;
                       :mod:`.native` the native generator (``sfcgen``), :mod:`.fake` one that
                       simulates a chain of known capacity, :mod:`.wrappers` generators made of
                       generators; :mod:`.place` where its sender and receiver run (a node's
                       namespace here, or on its host through the lab's runtime)
- :mod:`.ndr`          the NDR/PDR search, the rate curve and latency at a rate;
                       :mod:`.ndrlatency` latency at shares of the NDR; :mod:`.mlr` NDR/PDR by
                       MLRsearch
- :mod:`.window`       the measured window of a native trial
- :mod:`.limits`       whether a trial measures the chain or the measuring tools
- :mod:`.calibrate`    what the generator and the receiver can do by themselves
- :mod:`.cores`        which cores do what; :mod:`.first_hop` the chain's first hop off the
                       generator's core; :mod:`.xdp_path` what the live-frames engine needs of it
- :mod:`.cpu`          CPU use per core and per process
- :mod:`.histogram`    latency statistics in a log-linear histogram
- :mod:`.loss`         where lost packets died: node, interface, drop reason
- :mod:`.environment`  where a measurement ran: kernel, CPU, memory, tool versions
"""
