"""Pipeline stage package."""
