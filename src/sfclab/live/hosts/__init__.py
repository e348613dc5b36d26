"""The hosts of a running lab.

- :mod:`.capacity`: the hosts as placement sees them, with what they hold;
- :mod:`.underlay`: the underlay's tunnels for added instances and hosts;
- :mod:`.join`: joining a machine driven over SSH (``host add --ssh``).
"""
