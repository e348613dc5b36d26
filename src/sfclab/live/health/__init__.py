"""The lab's health watcher.

- :mod:`.watch`: the watcher process: probes of function instances and failover (slot tables
  rewritten over the paths left);
- :mod:`.watcher`: starting, finding and stopping it;
- the watchers' talk over the underlay on hosts driven over SSH: :mod:`.peerwatch`, its
  messages :mod:`.peermsg`, what a watcher knows of its peers :mod:`.peertable`.
"""
