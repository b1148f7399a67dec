#
#SBATCH --job-name=noshebang
#SBATCH --output=res.txt
#
#SBATCH --ntasks=1
#SBATCH --time=10

hostname
