"""predictions"""
