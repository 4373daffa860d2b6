"""Stand-ins for testing code that uses conductor, named for what they are (as httpx ships its
MockTransport): `fake_backend.FakeBackend`, a scripted model backend for fault injection, and
`simulated_pool.SimulatedPool`, a simulated pool of specialist models behind a local
OpenAI-compatible server, whose numbers are simulations and never a claim about real models.
conductor itself never imports this package; its tests and benches do.
"""
