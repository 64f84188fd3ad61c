"""The installed prefix: environment files and modulefiles, build-info, activate, what each
component installed. Uses the model only.
"""
