"""tfjob"""
