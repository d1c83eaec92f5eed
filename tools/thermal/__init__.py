"""The real thermal governor on a simulated plant (`plant`, also used by the governor's tests).

python -m tools.thermal.sim [--tau 60] [--lag 3]     (writes tools/reports/thermal-sim.*)
python -m tools.thermal.sweep [--quick]              (failures per criterion across a grid)
"""
