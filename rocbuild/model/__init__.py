"""The model: recipes, settings, targets, the rendered Stack and the commands of each step. Imports
nothing from the other layers.
"""
