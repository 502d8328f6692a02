"""The run planner: which runs would decide which of the papers' claims, and at what CPU cost.

``make plan PROFILE=medium`` (``python -m reproduce.plan``) reads the claims table, the report's
rows and the shipped run records (nothing trains) and ranks the campaigns of
``configs/campaigns.yaml`` by expected claims decided per CPU-hour:

* :mod:`~reproduce.plan.catalogue`: the campaigns, each a set of runs added to a sweep file's
  profile (or proposed, with what must be built first), and the claims each feeds;
* :mod:`~reproduce.plan.costs`: CPU-seconds per epoch from the records, epochs per new run;
* :mod:`~reproduce.plan.power`: P(a claim is decided at n runs), an injected function;
* :mod:`~reproduce.plan.ranking`: the greedy order and the cumulative curve with its band;
* :mod:`~reproduce.plan.planner` and :mod:`~reproduce.plan.table`: the plan, its table, the
  docs block and the figure.

It lives in the reproduction layer, not the installed package: it needs the claims table and the
shipped records of a clone, which an installed ``grok_lightning`` does not have.
"""
