"""The parts of ``agui_pipes.client``: its errors, its bounds, its checks and its sync face.

Private: everything here is imported and exported by ``agui_pipes.client``, the one
public home of these names.
"""
