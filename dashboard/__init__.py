"""The server-rendered pages for tenants (overview, keys, team, playground, voices, jobs, docs) and
staff (operations): the top layer, which may use every other app and which none of them uses."""
