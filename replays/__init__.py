"""replays"""
