"""Test doubles, named as such: an in-memory backend and a stand-in operator."""
