"""servers"""
