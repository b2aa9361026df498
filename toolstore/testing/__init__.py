"""Test helpers shipped with toolstore: local fakes of remote services (see :mod:`toolstore.testing.fake_openai`)."""
