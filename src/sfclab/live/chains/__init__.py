"""The parts of a chain on a running lab.

- :mod:`.tables`: the chain's labels, paths and slot tables in the data plane's maps;
  :mod:`.classify_maps`: its classifier entries;
- :mod:`.wire`: the nodes made for an added chain (namespace, veth, addresses, routes, the
  data plane's programs);
- :mod:`.handover` (the steps of a migration that run where a node lives) and :mod:`.moves`
  (a migration's records and plans, whichever runtime makes it);
- :mod:`.conntrack`: connection-tracking entries copied to a clone; :mod:`.trace`: label
  traces of a chain's paths.
"""
