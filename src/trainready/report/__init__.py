"""Rendering reports: rich tables for people, versioned JSON for machines."""
