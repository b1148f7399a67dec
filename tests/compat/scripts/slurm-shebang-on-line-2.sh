
#!/usr/bin/env bash
#SBATCH --job-name=hello-line2
#SBATCH --ntasks=1
#SBATCH --time=00:05:00

hostname
