"""Test harnesses and fixtures shared by the test suites.

Tests import what they need from here (`tests.support.<module>`), never from each other.
"""
