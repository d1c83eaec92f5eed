"""The real thermal governor on a simulated plant (`plant`, also used by the governor's tests).

python -m tools.thermal.sim [--tau 60] [--lag 3]     (writes thermal-sim.* to the run-output folder)
python -m tools.thermal.sweep [--quick]              (failures per criterion across a grid)
"""
