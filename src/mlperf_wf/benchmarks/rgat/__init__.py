"""rgat: R-GAT node classification on IGBH-full (see README.md)."""
