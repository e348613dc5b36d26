"""Each host runtime's operations on a running lab.

- :mod:`.base`: the interface, :class:`~sfclab.live.runtime.base.LiveRuntime`, extending the
  realize layer's host runtime with what ``chain add``/``rm``, health, ``chain migrate`` and
  ``host add``/``rm`` need; :mod:`.table`: each runtime's class by name and ``live_for``, the
  lookup every operation on a running lab starts from;
- :mod:`.local` with :mod:`.local_migrate`: this machine makes everything, journaled in its
  journal;
- :mod:`.ssh` with :mod:`.ssh_migrate` and :mod:`.ssh_trace`: each host's agent makes its
  share, journaled there;
- :mod:`.kubernetes`: a lab on Kubernetes, whose Nodes' agents build and remove it whole; its
  operations on a running lab are refused for now;
- the agent's verbs on a host driven over SSH: :mod:`.agent_chain`, :mod:`.agent_health`,
  :mod:`.agent_conntrack`, :mod:`.agent_containers`, all in one table with the realize
  agent's, :mod:`.agent_verbs`.
"""
